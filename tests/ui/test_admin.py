"""Administration in the web UI. In a real browser: an admin creates a user, gives it an access
key and sees the secret once. Over HTTP: each action does what the auth API's verb does; a
non-admin sees no link and is refused every page and POST (403, nothing changed); a POST without
its CSRF token is refused; hostile user and group names show as text; an admin cannot delete or
demote itself; every user manages its own access keys and no one else's."""

from __future__ import annotations

import re
from html import unescape
from typing import Any
from urllib.parse import quote

import httpx

from tests.server.conftest import Live, unique
from tests.ui.conftest import Person, base_url, csrf_of, make_user, sign_in

HOSTILE = '"><img src=x onerror=alert(1)>'
UNLABELLED = """[...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
    .filter(e => !e.labels || e.labels.length === 0).map(e => e.name)"""


def _post(client: httpx.Client, action: str, **data: str) -> httpx.Response:
    token = csrf_of(client.get("/ui/account/keys").text)  # any page's token: one per session
    return client.post(action, data={**data, "csrf": token})


def _new_key(html: str) -> tuple[str, str]:
    """The access key id and secret a "new access key" page shows."""
    found = re.search(r'id="new-key-id">([^<]+)<.*id="new-key-secret">([^<]+)<', html, re.S)
    assert found is not None, "no new access key on the page"
    return unescape(found.group(1)), unescape(found.group(2))


def _groups_of(api: httpx.Client, user: str) -> list[str]:
    return [g["id"] for g in api.get(f"/auth/users/{user}/groups").json()["results"]]


def test_an_admin_creates_a_user_and_an_access_key_and_sees_the_secret_once(live: Live, page: Any) -> None:
    from playwright.sync_api import expect

    page.goto(base_url(live) + "/ui/login")
    page.get_by_label("Access key ID").fill(live.key_id)
    page.get_by_label("Secret access key").fill(live.secret)
    page.get_by_role("button", name="Sign in", exact=True).click()
    page.wait_for_url("**/ui/")
    page.get_by_role("navigation", name="Site").get_by_role("link", name="Administration").click()
    assert page.title() == "Users · Administration · lakectl"

    name = unique("dana")
    page.get_by_label("User name").fill(name)
    page.get_by_label("Role").select_option("Developer")
    page.get_by_role("button", name="Create user").click()
    page.wait_for_url(f"**/ui/admin/users/{name}")
    assert page.title() == f"{name} · Users · Administration · lakectl"
    expect(page.locator("dl.facts")).to_contain_text("Developer")
    expect(page.locator("#keys ~ p.empty").first).to_have_text("No access keys.")
    assert page.evaluate(UNLABELLED) == []

    page.get_by_role("button", name="Create access key").click()
    expect(page.get_by_role("alert")).to_contain_text("This is the only time it is shown")
    key_id = page.locator("#new-key-id").inner_text()
    secret = page.locator("#new-key-secret").inner_text()
    assert key_id.startswith("AKIA") and len(secret) == 40
    with httpx.Client(base_url=live.url, auth=(key_id, secret)) as as_new_user:
        assert as_new_user.get("/user").json()["user"]["id"] == name  # the key works

    page.get_by_role("link", name="Done: back to the access keys").click()
    expect(page.locator("table.keys")).to_contain_text(key_id)
    assert secret not in page.content()  # never shown again
    page.reload()
    assert secret not in page.content()

    # The roles page shows who holds each role.
    page.get_by_role("navigation", name="Administration").get_by_role("link", name="Roles").click()
    expect(page.get_by_role("row").filter(has_text="Developers")).to_contain_text(name)


def test_users_groups_roles_and_keys_by_form(live: Live, api: httpx.Client, admin: httpx.Client) -> None:
    name = unique("erin")
    made = _post(admin, "/ui/admin/users", id=name, role="")
    assert made.status_code == 303 and made.headers["location"] == f"/ui/admin/users/{name}"
    assert api.get(f"/auth/users/{name}").json()["role"] is None
    assert name in admin.get("/ui/admin/users").text
    assert _post(admin, "/ui/admin/users", id=name).status_code == 409  # taken

    # role: set on the user's page, and from the roles page
    assert _post(admin, f"/ui/admin/users/{name}/role", role="Analyst").status_code == 303
    assert _groups_of(api, name) == ["Viewers"]
    assert _post(admin, "/ui/admin/roles", user=name, role="Developer").status_code == 303
    assert _groups_of(api, name) == ["Developers"]
    assert _post(admin, "/ui/admin/roles", user=name, role="Boss").status_code == 400
    roles = admin.get("/ui/admin/roles").text
    developers = re.search(r"<th scope=\"row\">Developer</th>.*?</tr>", roles, re.S)
    assert developers is not None and name in developers.group(0)

    # groups: create, add and remove members, attach a policy, delete
    group = unique("team")
    created = _post(admin, "/ui/admin/groups", id=group, description="the data team")
    assert created.status_code == 303 and created.headers["location"] == f"/ui/admin/groups/{group}"
    assert api.get(f"/auth/groups/{group}").json()["description"] == "the data team"
    assert _post(admin, f"/ui/admin/groups/{group}/members", user=name).status_code == 303
    assert sorted(_groups_of(api, name)) == ["Developers", group]
    assert name in admin.get(f"/ui/admin/groups/{group}").text
    assert _post(admin, f"/ui/admin/groups/{group}/policies", policy="FSReadAll").status_code == 303
    attached = api.get(f"/auth/groups/{group}/policies").json()["results"]
    assert [p["id"] for p in attached] == ["FSReadAll"]
    assert _post(admin, f"/ui/admin/groups/{group}/policies/FSReadAll/detach").status_code == 303
    assert api.get(f"/auth/groups/{group}/policies").json()["results"] == []
    removed = _post(admin, f"/ui/admin/groups/{group}/members/{name}/remove", back="user")
    assert removed.status_code == 303 and removed.headers["location"] == f"/ui/admin/users/{name}#groups"
    assert _groups_of(api, name) == ["Developers"]
    assert _post(admin, "/ui/admin/users/" + name + "/groups", group=group).status_code == 303
    assert sorted(_groups_of(api, name)) == ["Developers", group]
    assert _post(admin, f"/ui/admin/groups/{group}/delete").status_code == 303
    assert api.get(f"/auth/groups/{group}").status_code == 404
    assert _post(admin, "/ui/admin/groups/Admins/delete").status_code == 400  # built in

    # policies of the user, on its page
    assert _post(admin, f"/ui/admin/users/{name}/policies", policy="FSReadAll").status_code == 303
    page = admin.get(f"/ui/admin/users/{name}").text
    assert "<code>FSReadAll</code>" in page and "FSReadWriteAll" in page  # attached; through Developers
    assert _post(admin, f"/ui/admin/users/{name}/policies/FSReadAll/detach").status_code == 303
    assert api.get(f"/auth/users/{name}/policies").json()["results"] == []

    # access keys: created (the secret in that answer only), listed, deleted
    created_key = _post(admin, f"/ui/admin/users/{name}/keys")
    assert created_key.status_code == 201
    key_id, secret = _new_key(created_key.text)
    assert created_key.headers["cache-control"] == "no-store"
    with httpx.Client(base_url=live.url, auth=(key_id, secret)) as as_user:
        assert as_user.get("/user").status_code == 200
    listed = admin.get(f"/ui/admin/users/{name}").text
    assert key_id in listed and secret not in listed
    assert _post(admin, f"/ui/admin/users/{name}/keys/{key_id}/delete").status_code == 303
    assert api.get(f"/auth/users/{name}/credentials").json()["results"] == []

    # the user, deleted
    assert _post(admin, f"/ui/admin/users/{name}/delete").status_code == 303
    assert api.get(f"/auth/users/{name}").status_code == 404
    assert admin.get(f"/ui/admin/users/{name}").status_code == 404


def test_an_admin_cannot_delete_or_demote_itself(live: Live, api: httpx.Client, admin: httpx.Client) -> None:
    assert _post(admin, "/ui/admin/users/admin/delete").status_code == 400
    assert _post(admin, "/ui/admin/users/admin/role", role="Developer").status_code == 400
    assert _post(admin, "/ui/admin/groups/Admins/members/admin/remove").status_code == 400
    assert _groups_of(api, "admin") == ["Admins"]
    assert "Delete user" not in admin.get("/ui/admin/users/admin").text
    # the API refuses the same, through the same verbs
    assert api.delete("/auth/users/admin").status_code == 400
    assert api.delete("/auth/groups/Admins/members/admin").status_code == 400


def test_a_non_admin_sees_no_administration_and_is_refused(live: Live, api: httpx.Client) -> None:
    developer: Person = make_user(live, "Developers")
    victim = make_user(live, "Viewers")
    victim_key = api.get(f"/auth/users/{victim.id}/credentials").json()["results"][0]["access_key_id"]
    group = unique("crew")
    assert api.post("/auth/groups", json={"id": group}).status_code == 201
    with sign_in(live, developer.key_id, developer.secret) as ui:
        home = ui.get("/ui/")
        assert "Administration" not in home.text and "/ui/admin" not in home.text
        assert "My access keys" in home.text
        admin_pages = [f"/ui/admin/users/{victim.id}", f"/ui/admin/groups/{group}"]
        for path in ["/ui/admin", "/ui/admin/users", "/ui/admin/groups", "/ui/admin/roles", *admin_pages]:
            assert ui.get(path).status_code == 403, path
        token = csrf_of(home.text)
        posts = {
            "/ui/admin/users": {"id": "intruder"},
            f"/ui/admin/users/{victim.id}/delete": {},
            f"/ui/admin/users/{victim.id}/role": {"role": "Admin"},
            f"/ui/admin/users/{developer.id}/role": {"role": "Admin"},
            f"/ui/admin/users/{victim.id}/groups": {"group": "Admins"},
            f"/ui/admin/users/{victim.id}/policies": {"policy": "AdminAccess"},
            f"/ui/admin/users/{victim.id}/keys": {},
            f"/ui/admin/users/{victim.id}/keys/{victim_key}/delete": {},
            "/ui/admin/groups": {"id": "intruders"},
            f"/ui/admin/groups/{group}/delete": {},
            f"/ui/admin/groups/{group}/members": {"user": developer.id},
            f"/ui/admin/groups/{group}/policies": {"policy": "AdminAccess"},
            f"/ui/admin/groups/Developers/members/{developer.id}/remove": {},
            "/ui/admin/roles": {"user": developer.id, "role": "Admin"},
        }
        for action, data in posts.items():
            refused = ui.post(action, data={**data, "csrf": token})
            assert refused.status_code == 403, (action, refused.text[:200])
            assert "is not allowed" in unescape(refused.text)
        # Its own keys are its own only: another user's key is not found among them.
        assert ui.post(f"/ui/account/keys/{victim_key}/delete", data={"csrf": token}).status_code == 404
    assert api.get("/auth/users/intruder").status_code == 404
    assert api.get("/auth/groups/intruders").status_code == 404
    assert api.get(f"/auth/users/{victim.id}").json()["role"] == "Analyst"
    assert _groups_of(api, developer.id) == ["Developers"]
    assert len(api.get(f"/auth/users/{victim.id}/credentials").json()["results"]) == 1
    assert api.get(f"/auth/users/{victim.id}/policies").json()["results"] == []
    assert api.get(f"/auth/groups/{group}/members").json()["results"] == []


def test_everyone_manages_its_own_access_keys(live: Live, api: httpx.Client) -> None:
    viewer = make_user(live, "Viewers")
    with sign_in(live, viewer.key_id, viewer.secret) as ui:
        mine = ui.get("/ui/account/keys")
        assert mine.status_code == 200 and viewer.key_id in mine.text
        created = ui.post("/ui/account/keys", data={"csrf": csrf_of(mine.text)})
        assert created.status_code == 201 and "This is the only time it is shown" in created.text
        key_id, _ = _new_key(created.text)
        listed = [
            c["access_key_id"] for c in api.get(f"/auth/users/{viewer.id}/credentials").json()["results"]
        ]
        assert sorted(listed) == sorted([viewer.key_id, key_id])
        gone = ui.post(f"/ui/account/keys/{key_id}/delete", data={"csrf": csrf_of(mine.text)})
        assert gone.status_code == 303 and gone.headers["location"] == "/ui/account/keys"
    listed = [c["access_key_id"] for c in api.get(f"/auth/users/{viewer.id}/credentials").json()["results"]]
    assert listed == [viewer.key_id]


def test_a_post_without_its_csrf_token_changes_nothing(api: httpx.Client, admin: httpx.Client) -> None:
    name = unique("csrf")
    for data in ({"id": name}, {"id": name, "csrf": "0" * 64}):
        assert admin.post("/ui/admin/users", data=data).status_code == 403
    assert admin.post("/ui/account/keys", data={}).status_code == 403
    assert api.get(f"/auth/users/{name}").status_code == 404
    assert len(api.get("/auth/users/admin/credentials").json()["results"]) == 1


def test_hostile_user_and_group_names_show_as_text(api: httpx.Client, admin: httpx.Client) -> None:
    user = HOSTILE + unique("u")
    group = "<b>" + unique("g")
    assert _post(admin, "/ui/admin/users", id=user).status_code == 303
    assert _post(admin, "/ui/admin/groups", id=group).status_code == 303
    assert _post(admin, "/ui/admin/roles", user=user, role="Analyst").status_code == 303
    members = _post(admin, f"/ui/admin/groups/{quote(group, safe='')}/members", user=user)
    assert members.status_code == 303
    for path in ("/ui/admin/users", "/ui/admin/groups", "/ui/admin/roles", members.headers["location"]):
        shown = admin.get(path)
        assert shown.status_code == 200, path
        assert "<img src=x" not in shown.text and group not in shown.text, path
    users_page = admin.get("/ui/admin/users").text
    assert "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in users_page
    assert "&lt;b&gt;" in admin.get("/ui/admin/groups").text
    assert [u["id"] for u in api.get(f"/auth/groups/{group}/members").json()["results"]] == [user]
