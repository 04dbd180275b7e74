from attncli.cli import main

main()
