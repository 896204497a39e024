"""Tables, the engine per dialect, migrations, and one module per stored noun: its queries,
which take and return the domain's values (``domain/runs.py``'s ``Run``,
``domain/deployments.py``'s ``Deployment``...; a query's own arguments and intermediate rows
stay here). Never imports the runtime or the engine."""
