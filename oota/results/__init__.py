"""Results: the typed model of a cell's run (model), its one builder (assemble), and its one
writer and reader (store)."""
