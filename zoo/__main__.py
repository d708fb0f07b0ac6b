from mend.zoo.cli import main

raise SystemExit(main())
