from tailwise.cli.main import main

main()
