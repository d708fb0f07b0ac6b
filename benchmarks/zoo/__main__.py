from benchmarks.zoo.cli import main

raise SystemExit(main())
