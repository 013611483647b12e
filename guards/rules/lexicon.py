"""Small English word lists the heuristics share (no I/O: they are literals)."""

from __future__ import annotations


def _words(text: str) -> list[str]:
    """Whitespace-separated words of a literal (keeps the long lists readable)."""
    return text.split()


AUXILIARIES = frozenset(
    _words("""am is are was were be been being has have had having do does did done will would
    shall should can could may might must isn't aren't wasn't weren't hasn't haven't hadn't
    doesn't don't didn't won't wouldn't can't cannot couldn't shouldn't mustn't 's 're 've 'll 'd
    """)
)

# Base forms of common verbs; inflections are generated below.
_BASE_VERBS = _words("""
accept add affect agree allow announce appear apply arrive ask attend become begin believe
belong bring build buy call cancel carry cause change charge choose claim close come compete
complete consider contain continue cost cover create cut deal decide define deliver depend
describe design destroy develop die direct discover drive earn eat employ enable end enjoy
ensure enter establish exist expand expect explain extend fail fall feature feel fight file
find finish flow fly follow form found gain get give go grow happen help hold host include
increase introduce invent involve join keep kill know last launch lead learn leave let lie
like limit live locate lose love maintain make manage mark marry mean meet merge move name
need note observe obtain occur offer open operate order own pay perform place plan play
portray produce protect provide publish purchase raise reach read receive record reduce
refer refund release remain remove renew replace report represent require rest retire return
reveal rise rule run say score see seem sell send serve set share ship show sign sing sit
speak spend stand star start state stay stop study succeed suggest support take teach tell
tend think train transfer travel treat try turn use vary visit wait want warn win work write
""")

_IRREGULAR = _words("""
ate became began bore born bought brought built came caught chose cost cut did drew drove fell
felt fled flew forgot found gave got gone grew had held hid kept knew known laid lay led left
lent lost made meant met paid put ran rose said sang sat saw seen sent set shot showed shown
slept sold spent spoke stood stole struck swam taught thought threw told took understood
went won wore wrote written
""")


def _inflect(base: str) -> set[str]:
    forms = {base}
    if base.endswith(("s", "sh", "ch", "x", "z", "o")):
        forms.add(base + "es")
    elif base.endswith("y") and base[-2:-1] not in "aeiou":
        forms.add(base[:-1] + "ies")
        forms.add(base[:-1] + "ied")
    else:
        forms.add(base + "s")
    if base.endswith("e"):
        forms.add(base + "d")
        forms.add(base[:-1] + "ing")
    elif not base.endswith("y") or base[-2:-1] in "aeiou":
        forms.add(base + "ed")
        forms.add(base + "ing")
    else:
        forms.add(base + "ing")
    return forms


VERB_FORMS = frozenset({form for base in _BASE_VERBS for form in _inflect(base)} | set(_IRREGULAR))

# Words ending in "-ed" that are rarely verbs.
ED_NOT_VERBS = frozenset(_words("bed need red seed speed shed hundred indeed breed feed greed"))

PRONOUN_SUBJECTS = frozenset(_words("i you he she it we they this that these those there"))


def is_verbish(word: str) -> bool:
    """A cheap stand-in for a part-of-speech tagger: does ``word`` look like a verb?"""
    w = word.lower().replace("’", "'")
    if w in AUXILIARIES or w in VERB_FORMS or w.endswith("n't"):
        return True
    return len(w) >= 6 and w.endswith("ed") and w not in ED_NOT_VERBS


MONTHS = {
    name: i + 1
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ]
    )
    for name in names
}

WEEKDAYS = frozenset(
    _words("monday tuesday wednesday thursday friday saturday sunday mon tue wed thu fri sat sun")
)

NUMBER_WORDS = {
    "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20,
    "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80,
    "ninety": 90, "hundred": 100, "dozen": 12,
}  # fmt: skip

SCALES = {
    "k": 1e3, "thousand": 1e3, "m": 1e6, "mn": 1e6, "million": 1e6, "b": 1e9, "bn": 1e9,
    "billion": 1e9, "trillion": 1e12, "tn": 1e12,
}  # fmt: skip

CURRENCY_WORDS = {
    "dollar": "$", "dollars": "$", "usd": "$", "euro": "€", "euros": "€", "eur": "€",
    "pound": "£", "pounds": "£", "gbp": "£", "yen": "¥", "jpy": "¥",
}  # fmt: skip

# Capitalized words that start sentences or headings without naming anything.
COMMON_CAPITALIZED = frozenset(
    _words("""a an the this that these those it its he she they we you i our your their my his her
    in on at by for from with to of as if when while after before during since until and or
    but so yes no not however also although though because here there some many most all any
    each every both either neither one first second third finally overall note please today
    yesterday tomorrow additionally furthermore moreover therefore thus then now currently
    according based generally typically usually sure certainly""")
)

# Words that deny what follows them in a clause ("It was never 10 years").
NEGATIONS = frozenset(_words("not no never none neither nor without cannot nothing nobody"))
# After a negation, a word that makes it a bound, not a denial ("no more than 10").
NEGATION_BOUNDS = frozenset(
    _words("""more less fewer later earlier longer shorter sooner over under above below
    exceeding beyond before after until till only just merely""")
)

# Predicates that call a statement false ("Rumours that … are false", "… is a myth").
FALSITY = frozenset(
    _words("""false untrue incorrect wrong myth myths inaccurate unfounded baseless mistaken
    misleading fake bogus debunked hoax misconception misinformation nonsense rumour rumor""")
)
COPULAS = frozenset(_words("is are was were be been being 's 're remains remain seems seem"))
# Verbs and adverbs that disown the statement after "that" ("We deny that …", "It was
# wrongly reported that …").
DISOWNING = frozenset(
    _words("""deny denies denied denying refute refutes refuted dispute disputes disputed
    reject rejects rejected debunk debunks debunked disprove disproves disproved wrongly
    falsely incorrectly erroneously mistakenly wrongfully""")
)
# Subjects that take up the statement just made ("…, but this is wrong").
ANAPHORS = frozenset(_words("this that it which these those"))
# Words opening a clause that supposes or asks instead of asserting ("If …", "… whether …");
# the first two only at the head of their clause ("… 48 months if you register" asserts).
CONDITIONALS = frozenset(_words("if unless"))
SUPPOSITIONS = frozenset(_words("whether suppose supposing imagine assuming hypothetically"))
# Words that may stand before a conditional at the head of its clause ("even if …").
CONDITIONAL_LEADS = frozenset(_words("even only and or but so just as"))
# A label on the next sentence that rules on the one before ("Verdict: false").
RULING_LABELS = frozenset(_words("verdict rating ruling status truth conclusion"))
MODALS = frozenset(_words("should must shall may might can could would will ought need"))
# Speech verbs that put a value in someone's mouth ("tell them that …", "answer: …"); the
# second set are also nouns ("the answer", "a claim"): they need "that", ":" or a quote after.
SPEECH_VERBS = frozenset(_words("say tell assure inform insist pretend respond mention"))
SPEECH_VERBS_MARKED = frozenset(_words("answer reply claim promise state write confirm repeat"))
# Words that may stand before an imperative in its clause ("When asked, always say …").
IMPERATIVE_LEADS = frozenset(_words("please always just simply also now instead do"))
# Words a question opens with ("Does it …?", "How long …?").
INTERROGATIVES = frozenset(
    _words("""is are was were am do does did can could will would shall should may might must
    has have had how what when where who whom whose which why whether isn't aren't doesn't
    don't didn't can't won't""")
)
