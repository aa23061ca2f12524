"""Post-actions on a Microsoft Graph mailbox: the real ``GraphMailbox`` against the loopback fake over verified TLS.

Messages are stored by the real poller first (``poll_now``), so ``Request.provider_ref`` holds the Graph ids the
post-actions name; then ``apply_post_actions`` runs on an open provider session, as the poll's last step does.
The polls that follow show that a message marked read or moved is neither stored twice nor in the way of new mail.
"""

from __future__ import annotations

import logging
import socket

import pytest

from mailpoll.models import Mailbox, PostAction, Request
from mailpoll.oauth import tokens as oauth
from mailpoll.providers.base import (DONE, ERROR, GONE, LABEL, MARK_READ, MOVE, PollInterrupted, PostActionItem,
                                     PostActionResult, ProviderError)
from mailpoll.providers.graph import FOLDER_PAGE
from mailpoll.providers.graph_mailbox import GraphMailbox
from tests.mailpoll.factories import MailboxFactory, poll_now
from tests.support.fake_graph import CLIENT_SECRET, USER, FakeGraph, Sink

pytestmark = pytest.mark.django_db(transaction=True)

AUTHS = ["service", "oauth"]
DONE_ = PostActionResult(DONE)


def mail(n: int) -> bytes:
    return (f"From: sender{n}@example.com\r\nTo: {USER}\r\nSubject: message {n}\r\n"
            f"Message-ID: <graph-pa{n}@example.com>\r\n\r\nhello\r\n").encode()


@pytest.fixture(autouse=True)
def waits(monkeypatch):
    """What throttled requests waited, recorded instead of slept."""
    recorded: list[float] = []
    monkeypatch.setattr(GraphMailbox, "sleep", staticmethod(recorded.append))
    return recorded


def graph_mailbox(fake: FakeGraph, auth: str = "service", **fields) -> Mailbox:
    fields.setdefault("initial_mode", "full")
    mailbox = MailboxFactory(provider="graph", auth=auth, host="", security="tls", username=USER, **fields)
    if auth == "oauth":
        oauth.connect(mailbox, "microsoft", refresh_token=fake.grant_refresh_token())
    return mailbox


def stored(fake: FakeGraph, auth: str = "service", count: int = 1, **fields) -> tuple[Mailbox, list[str]]:
    """A mailbox whose inbox's ``count`` messages were stored by a poll; their Graph ids."""
    ids = [fake.add("inbox", mail(n)).id for n in range(count)]
    mailbox = graph_mailbox(fake, auth, **fields)
    poll_now(mailbox)
    assert mailbox.last_error == "" and refs(mailbox) == sorted(ids)
    return mailbox, ids


def apply(mailbox: Mailbox, *items: tuple, folder: str = "INBOX") -> dict:
    """``apply_post_actions`` on a session of its own; items are (ref, action[, destination]), ids from 1."""
    actions = [PostActionItem(n, item[0], None, *item[1:]) for n, item in enumerate(items, 1)]
    with GraphMailbox(mailbox) as provider:
        results = provider.apply_post_actions(folder, actions)
    assert set(results) == {action.id for action in actions}
    return results


def refs(mailbox) -> list[str]:
    return sorted(Request.objects.filter(mailbox=mailbox).values_list("provider_ref", flat=True))


def changes(fake: FakeGraph) -> list[tuple[str, str]]:
    """The change requests sent: (method, path after the user)."""
    return [(method, path.split(f"/users/{USER}/", 1)[1]) for method, path, _ in fake.requests
            if method in ("PATCH", "POST") and path.startswith("/v1.0/")]


def folder_lists(fake: FakeGraph) -> list[str]:
    return [path for method, path, _ in fake.requests if method == "GET" and "/mailFolders" in path
            and not path.endswith("/delta")]


def value_requests(fake: FakeGraph) -> list[str]:
    return [path.split("/")[5] for _, path, _ in fake.requests_to("/$value")]


def raws(fake: FakeGraph, folder: str) -> list[bytes]:
    return [message.raw for message in fake.folders.get(folder, [])]


# -- mark read, move ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("auth", AUTHS)
def test_mark_read_marks_the_message_read_where_it_is(graph, auth):
    mailbox, [mid] = stored(graph, auth)
    assert apply(mailbox, (mid, MARK_READ)) == {1: DONE_}
    assert graph.message(mid).is_read and graph.folder_of(mid) == "inbox"
    assert changes(graph) == [("PATCH", f"messages/{mid}")]


@pytest.mark.parametrize("destination", ["archive", "Archive", "DeletedItems"])
def test_a_move_to_a_well_known_name_goes_as_graph_knows_it_without_listing_folders(graph, destination):
    mailbox, [mid] = stored(graph)
    assert apply(mailbox, (mid, MOVE, destination)) == {1: DONE_}
    assert graph.message(mid) is None and raws(graph, "inbox") == []
    assert raws(graph, destination.lower()) == [mail(0)]  # under a new id, as Graph's moves do
    assert changes(graph) == [("POST", f"messages/{mid}/move")] and folder_lists(graph) == []


def test_a_move_to_a_display_name_lists_the_folders_once_a_session(graph):
    processed = graph.add_folder("Processed")
    graph.add_folder("Processed later")
    mailbox, ids = stored(graph, count=3)
    # Exactly, in another case, and Graph's own display name of a well-known folder.
    results = apply(mailbox, (ids[0], MOVE, "Processed"), (ids[1], MOVE, "PROCESSED"), (ids[2], MOVE, "Junk Email"))
    assert results == {1: DONE_, 2: DONE_, 3: DONE_}
    assert raws(graph, processed) == [mail(0), mail(1)] and raws(graph, "junkemail") == [mail(2)]
    assert folder_lists(graph) == [f"/v1.0/users/{USER}/mailFolders"]


def test_a_move_to_a_path_walks_the_child_folders(graph):
    clients = graph.add_folder("Clients")
    acme = graph.add_folder("Acme", parent=clients)
    handled = graph.add_folder("Handled", parent="inbox")
    mailbox, ids = stored(graph, count=3)
    results = apply(mailbox, (ids[0], MOVE, "Clients/Acme"), (ids[1], MOVE, "inbox/Handled"),
                    (ids[2], MOVE, "Clients/Nobody"))
    assert results[1] == DONE_ and results[2] == DONE_
    assert raws(graph, acme) == [mail(0)] and raws(graph, handled) == [mail(1)]
    assert results[3].outcome == ERROR and 'no mail folder named "Clients/Nobody"' in results[3].detail
    assert graph.folder_of(ids[2]) == "inbox"


def test_a_display_name_past_the_first_page_of_folders_is_found(graph):
    for n in range(FOLDER_PAGE + 5):
        last = graph.add_folder(f"Folder {n:03d}")
    mailbox, [mid] = stored(graph)
    assert apply(mailbox, (mid, MOVE, f"Folder {FOLDER_PAGE + 4:03d}")) == {1: DONE_}
    assert raws(graph, last) == [mail(0)]
    assert len(folder_lists(graph)) == 2  # the nextLink was followed


def test_an_unknown_folder_is_an_error_naming_it_and_nothing_moves(graph):
    graph.add_folder("Processed")
    mailbox, [mid] = stored(graph)
    [result] = apply(mailbox, (mid, MOVE, "Processd")).values()
    assert result.outcome == ERROR and 'no mail folder named "Processd"' in result.detail
    assert graph.folder_of(mid) == "inbox" and changes(graph) == []
    assert "Processd" not in {folder.name for folder in graph.mail_folders.values()}  # no folder was made


def test_an_unknown_message_is_gone(graph):
    mailbox, [mid] = stored(graph)
    results = apply(mailbox, ("AAMk-unknown", MARK_READ), ("AAMk-unknown-too", MOVE, "archive"), (mid, MARK_READ))
    assert results[1].outcome == GONE and "404 ErrorItemNotFound" in results[1].detail
    assert results[2].outcome == GONE and results[3] == DONE_
    assert raws(graph, "archive") == []


def test_a_404_for_a_message_still_there_is_the_destinations_error_not_gone(graph):
    mailbox, [mid] = stored(graph)
    graph.refuse_change_of[mid] = (404, "ErrorItemNotFound")  # as Graph answers a destination it does not have
    [result] = apply(mailbox, (mid, MOVE, "archive")).values()
    assert result.outcome == ERROR and 'no mail folder "archive"' in result.detail
    assert graph.folder_of(mid) == "inbox"


def test_a_message_moved_away_in_the_same_call_is_marked_read_first(graph):
    mailbox, [mid] = stored(graph)
    # The rows come move first; Graph's move gives the message a new id, so the mark read must go before it.
    results = apply(mailbox, (mid, MOVE, "archive"), (mid, MARK_READ))
    assert results == {1: DONE_, 2: DONE_}
    assert [message.is_read for message in graph.folders["archive"]] == [True]


def test_a_label_is_gmails_and_nothing_is_sent(graph):
    mailbox, [mid] = stored(graph)
    [result] = apply(mailbox, (mid, LABEL, "Invoices")).values()
    assert result.outcome == ERROR and "labels are Gmail's" in result.detail
    assert changes(graph) == [] and graph.folder_of(mid) == "inbox"


# -- refusals ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("auth, says", [
    ("service", "Mail.ReadWrite application permission"),
    ("oauth", "needs Mail.ReadWrite: reconnect the mailbox"),
])
def test_a_403_is_an_error_saying_which_permission_and_the_rest_are_not_sent(graph, auth, says, caplog):
    caplog.set_level(logging.DEBUG)
    mailbox, ids = stored(graph, auth, count=3)
    graph.refuse_change = (403, "ErrorAccessDenied")
    results = apply(mailbox, (ids[0], MARK_READ), (ids[1], MARK_READ), (ids[2], MOVE, "archive"))
    assert {result.outcome for result in results.values()} == {ERROR}
    assert all("403 ErrorAccessDenied" in r.detail and says in r.detail for r in results.values())
    assert len(changes(graph)) == 1
    assert not graph.message(ids[0]).is_read and graph.folder_of(ids[2]) == "inbox"
    assert "403 ErrorAccessDenied" in caplog.text  # the logs were captured
    assert CLIENT_SECRET not in caplog.text and not [t for t in graph.issued if t in caplog.text]


def test_a_throttled_change_is_an_error_at_once_and_the_rest_are_not_sent(graph, waits):
    mailbox, ids = stored(graph, count=2)
    graph.throttle = [(429, "30")]
    results = apply(mailbox, (ids[0], MARK_READ), (ids[1], MARK_READ))
    assert [r.outcome for r in results.values()] == [ERROR, ERROR]
    assert all(r.detail.startswith("throttled") and "30 s" in r.detail for r in results.values())
    assert waits == [] and len(changes(graph)) == 1
    assert not any(graph.message(mid).is_read for mid in ids)
    # The next session (the caller's retry) goes through.
    assert apply(mailbox, (ids[0], MARK_READ), (ids[1], MARK_READ)) == {1: DONE_, 2: DONE_}


def test_a_server_error_is_that_messages_error_with_graphs_code_and_the_others_go_on(graph):
    mailbox, ids = stored(graph, count=2)
    graph.refuse_change_of[ids[0]] = (500, "ErrorInternalServerError")
    results = apply(mailbox, (ids[0], MARK_READ), (ids[1], MARK_READ))
    assert results[1].outcome == ERROR and "500 ErrorInternalServerError: Something failed." in results[1].detail
    assert results[2] == DONE_ and graph.message(ids[1]).is_read


def test_a_refused_folder_list_is_the_moves_error(graph):
    mailbox, ids = stored(graph, count=2)
    graph.refuse_folders = (500, "ErrorInternalServerError")
    results = apply(mailbox, (ids[0], MOVE, "Processed"), (ids[1], MARK_READ))
    assert results[1].outcome == ERROR and "mail folder list" in results[1].detail
    assert "500 ErrorInternalServerError" in results[1].detail and results[2] == DONE_


def test_a_folder_list_link_outside_the_api_is_not_followed(graph):
    sink = Sink()
    try:
        for n in range(FOLDER_PAGE + 1):
            graph.add_folder(f"Folder {n:03d}")
        mailbox, [mid] = stored(graph)
        graph.links_base = f"{sink.origin}/v1.0"
        with pytest.raises(ProviderError, match="outside"):
            apply(mailbox, (mid, MOVE, "Nowhere"))
        assert sink.received == [] and graph.folder_of(mid) == "inbox"
    finally:
        sink.stop()


def test_an_interrupted_session_raises_and_sends_nothing(graph):
    mailbox, [mid] = stored(graph)
    with GraphMailbox(mailbox) as provider:
        provider.interrupt("the poll's deadline passed")
        with pytest.raises(PollInterrupted, match="deadline passed"):
            provider.apply_post_actions("INBOX", [PostActionItem(1, mid, None, MARK_READ)])
    assert changes(graph) == []


def test_a_lost_connection_raises_a_provider_error(graph, settings):
    mailbox, [mid] = stored(graph)
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    settings.MAILPOLL_GRAPH_API_URL = f"https://127.0.0.1:{port}/v1.0"  # nothing listens there any more
    with GraphMailbox(mailbox) as provider:
        with pytest.raises(ProviderError, match="Graph request failed"):
            provider.apply_post_actions("INBOX", [PostActionItem(1, mid, None, MARK_READ)])


# -- the polls after -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("ignore_change_type", [False, True], ids=["graph", "graph-ignoring-changeType"])
def test_the_next_poll_stores_new_mail_once_and_nothing_twice(graph, ignore_change_type):
    mailbox, ids = stored(graph, count=3)
    graph.ignore_change_type = ignore_change_type  # updates and removals reported too: dedup must absorb them
    assert apply(mailbox, (ids[0], MARK_READ), (ids[1], MOVE, "archive")) == {1: DONE_, 2: DONE_}
    new = graph.add("inbox", mail(9)).id
    fetched = len(value_requests(graph))
    poll_now(mailbox)
    assert mailbox.last_error == "" and refs(mailbox) == sorted([*ids, new])
    if not ignore_change_type:
        # changeType=created: the read and moved messages are no new mail, nothing of them is downloaded again.
        assert value_requests(graph)[fetched:] == [new]
    else:
        assert new in value_requests(graph)[fetched:] and ids[1] not in value_requests(graph)[fetched:]
    poll_now(mailbox)
    assert refs(mailbox) == sorted([*ids, new]) and mailbox.last_error == ""


def test_a_message_moved_into_another_polled_folder_is_not_a_second_request(graph):
    mailbox, [mid] = stored(graph, folders=["INBOX", "Archive"])
    assert apply(mailbox, (mid, MOVE, "archive")) == {1: DONE_}
    [moved] = graph.folders["archive"]
    later = graph.add("archive", mail(5)).id
    poll_now(mailbox)
    # The moved message has a new id there, and the same Message-ID: a duplicate, not a Request.
    assert moved.id != mid and mailbox.last_error == ""
    assert refs(mailbox) == sorted([mid, later])
    assert Request.objects.get(mailbox=mailbox, provider_ref=mid).folder == "INBOX"



# -- through the poll ----------------------------------------------------------------------------------------------

def test_the_poll_applies_the_mailbox_s_post_action_to_what_it_stored(graph):
    mailbox, [mid] = stored(graph, post_action="move", post_action_folder="archive")
    action = PostAction.objects.get(mailbox=mailbox)
    assert (action.provider_ref, action.uid, action.status, action.attempts) == (mid, None, "done", 1)
    assert [m.raw for m in graph.folders["archive"]] == [mail(0)] and graph.folders.get("inbox", []) == []
    later = graph.add("inbox", mail(1)).id
    poll_now(mailbox)
    assert refs(mailbox) == sorted([mid, later]) and graph.folders.get("inbox", []) == []


def test_a_refused_post_action_waits_for_a_later_poll_and_intake_goes_on(graph):
    graph.refuse_change = (403, "ErrorAccessDenied")
    mailbox, [mid] = stored(graph, auth="oauth", post_action="mark_read")
    action = PostAction.objects.get(mailbox=mailbox)
    assert (action.status, action.attempts) == ("pending", 1) and "Mail.ReadWrite" in action.last_error
    assert mailbox.last_error == "" and mailbox.consecutive_failures == 0
