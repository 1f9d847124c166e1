"""Column-role readers: one reader per role (interval bounds, labels and scores, sets, targets, levels, forecasts, weights and counts).

Every metric, the report and the CLI read a role through this layer, so one
input is accepted or refused the same way everywhere.
"""
