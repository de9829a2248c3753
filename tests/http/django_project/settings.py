"""Settings of the test project. ``FIRSTWRITE_DJANGO_UNGUARDED=1`` leaves the middleware out
(and makes ``@idempotent`` a no-op, see ``views.py``): the tests' proof that they can fail."""

from __future__ import annotations

import os

UNGUARDED = os.environ.get("FIRSTWRITE_DJANGO_UNGUARDED") == "1"

SECRET_KEY = "test-only"
DEBUG = False
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "django_project.urls"
USE_TZ = True
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "rest_framework"]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
MIDDLEWARE = [
    "django.middleware.common.CommonMiddleware",
    *([] if UNGUARDED else ["firstwrite.http.django.IdempotencyMiddleware"]),
]
FIRSTWRITE_IDEMPOTENCY = {
    "TABLE": "django-tests",
    "ROUTES": [
        {"path": "/orders", "methods": ["POST"], "require_key": True},
        {"path": "/charge", "methods": ["POST"], "require_key": True},
    ],
    "RECONCILE": "django_project.views.reconcile",
    "METHODS": ["POST"],
    "SCOPE": "django_project.views.tenant",
    "MAX_STORED_RESPONSE": 4096,
}
if os.environ.get("FIRSTWRITE_DJANGO_RESULTS"):  # a guard with a result store (a folder)
    FIRSTWRITE_IDEMPOTENCY["GUARD"] = "django_project.views.stored_guard"
    FIRSTWRITE_IDEMPOTENCY["SPOOL_THRESHOLD"] = 1 << 20
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": [],
    "UNAUTHENTICATED_USER": None,
}
LOGGING_CONFIG = None
