"""A real Django project for the Django middleware's tests (served by ``serve.py``)."""
