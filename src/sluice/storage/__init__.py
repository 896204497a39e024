"""Tables, the engine per dialect, migrations, and one module per stored noun. Never imports
the runtime or the engine."""
