"""Home feed pages (placeholder until notes land)."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """/home: the signed-in user's home timeline."""
    return render(request, "feed/home.html", {})
