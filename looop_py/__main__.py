from looop_py.console import main

main()
