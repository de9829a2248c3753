"""The visible blocks of README.md and docs/*.md, alone, as a reader pastes them: this module's
items are collected by ``conftest.py`` (one per visible block, named by document and line) and
run by ``doc_pasted.py``, not defined here."""
