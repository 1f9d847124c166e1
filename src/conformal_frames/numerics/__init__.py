"""Numerics: binomial and Wilson statistics, Brownian-bridge tails, the Gauss transform, slabs, resampling.

Pure functions over expressions or arrays; no metric lives here.
"""
