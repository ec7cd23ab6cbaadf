"""The bandit policy a new job gets when it names none (no heavy imports: the API reads it).

Chosen by evidence: the policy that leads on the measured replay corpus at T=20 and is not
worse on the simulated landscapes (bench/RESULTS.md "Measured replay benchmark",
docs/bandit.md "Choosing a policy").
"""

DEFAULT_POLICY = "kernelband"
