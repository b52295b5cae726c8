"""`python -m cachedoctor`."""

from cachedoctor.cli import main

if __name__ == "__main__":
    main()
