import sys

from h2htalk.cli import main

sys.exit(main())
