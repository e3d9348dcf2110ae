import sys

from kafkalab.cli import main

sys.exit(main())
