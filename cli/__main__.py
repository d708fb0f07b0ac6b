from mend.cli.app import main

main()
