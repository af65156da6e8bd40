from mulligan.cli import main

raise SystemExit(main())
