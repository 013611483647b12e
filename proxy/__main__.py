from groundproxy.proxy.cli.main import main

main()
