"""`python -m cachedoctor`."""

from cachedoctor.cli import run_program

if __name__ == "__main__":
    run_program()
