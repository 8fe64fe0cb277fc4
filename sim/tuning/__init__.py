"""`colosim tune`: Optuna studies over a policy's parameters against the simulator.

    spec = build_spec(Path("experiments/tune_koordinator.toml"), overrides={})
    study = open_study(spec, "sqlite:///tune.db", "demo")
    optimize(spec, study, jobs=2)
    print(summary_text(spec, study, "demo"))

`goals` (metrics, objectives, SLOs), `space` (a policy's Params as distributions),
`evaluate` (the objective as a pure function of a configuration), `outcome` (seeds × cases to
objective values and SLO violations), `study` (storage, resume, ask/tell in worker
processes), `output` and `report` (tables, the policy file, HTML), `validate` (on the host).
"""
