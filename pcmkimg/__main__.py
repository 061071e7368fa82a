"""python -m pcmkimg: the same as the pcmkimg command."""

from pcmkimg.cli import main

main()
