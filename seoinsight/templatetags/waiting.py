"""``{% waiting_for_you as queues %}``: the admin index's "Waiting for you" box (``seoinsight.waiting``)."""

from django import template

from seoinsight import waiting

register = template.Library()


@register.simple_tag(takes_context=True)
def waiting_for_you(context):
    return waiting.for_request(context["request"])
