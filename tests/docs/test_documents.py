"""The code blocks of README.md and docs/*.md: this module's items are collected by
``conftest.py`` (one per block, named by document and line), not defined here."""
