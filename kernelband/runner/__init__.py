"""Runners: code that runs inside sandboxed children and may import untrusted code.

A runner hands back raw material only (output files, timing samples) and may reject (its
checks are `kernelband.runner.checks`); the judge (`kernelband.evaluate`) never imports this
package and decides every verdict itself. Nothing here touches the database.
"""
