"""A constraint a form can run into speaks to the person who filled the form, not in the constraint's name.

Django validates a model's constraints in ``full_clean``; without a ``violation_error_message`` the page
would say "Constraint “sitetarget_has_prefix_or_property” is violated".
"""

from __future__ import annotations

import pytest
from django.contrib import admin

from seoinsight.orgscope import ReadOnly


def edited_through_forms() -> list:
    """The models whose admin lets someone type values (not the read-only lists), with their constraints."""
    return sorted({model for model, model_admin in admin.site._registry.items()
                   if not isinstance(model_admin, ReadOnly) and model._meta.constraints
                   and model._meta.app_label in ("seoinsight", "jobs", "imports", "outbox", "mailpoll")},
                  key=lambda model: model._meta.label)


@pytest.mark.parametrize("model", edited_through_forms(), ids=lambda model: model._meta.label)
def test_every_constraint_a_form_can_hit_has_a_human_message(model):
    bare = [constraint.name for constraint in model._meta.constraints
            if constraint.violation_error_message == constraint.default_violation_error_message]
    assert bare == [], f"give these constraints of {model._meta.label} a violation_error_message"
