from pisces.cli import main

raise SystemExit(main())
