"""The test project's routes: a plain view (guarded by the settings), a decorated one, REST
framework views (``@api_view`` and ``APIView``), and the side-effect counter."""

from __future__ import annotations

from django.urls import path

from . import views

urlpatterns = [
    path("orders", views.create_order),
    path("charge", views.charge),
    path("async-orders", views.create_order_async),
    path("decorated", views.decorated),
    path("decorated-async", views.decorated_async),
    path("transfer", views.transfer),
    path("big", views.big),
    path("export", views.export),
    path("stream", views.stream),
    path("drf/function", views.drf_function),
    path("drf/class", views.DrfOrders.as_view()),
    path("effects/<str:ident>", views.effects),
]
