"""Policy benchmark: SIMULATED reward landscapes and recorded replay tables for bandit policies."""
