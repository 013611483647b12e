from groundproxy.proxy.cli import main

main()
