from kchaos.cli import main

main()
