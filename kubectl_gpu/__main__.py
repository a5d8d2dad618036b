"""`python -m kubectl_gpu` runs the CLI."""

from kubectl_gpu.cli import main

main()
