from tailwise.cli import main

main()
