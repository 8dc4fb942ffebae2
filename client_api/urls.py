"""The Mastodon client API's addresses: /api/v1, /api/v2, /oauth, the well-known document and /health."""

from django.urls import path, re_path

from . import oauth, views

app_name = "client_api"

urlpatterns = [
    path("health", views.health, name="health"),
    path(".well-known/oauth-authorization-server", views.authorization_server, name="authorization_server"),
    path("oauth/authorize", oauth.AuthorizeView.as_view(), name="authorize"),
    path("oauth/token", oauth.TokenView.as_view(), name="token"),
    path("oauth/revoke", oauth.RevokeView.as_view(), name="revoke"),
    path("settings/applications/", oauth.authorized_apps, name="authorized_apps"),
    path("settings/applications/<str:application_id>/revoke", oauth.authorized_app_revoke, name="authorized_app_revoke"),
    re_path(r"^api/v1/instance/?$", views.instance_v1, name="instance_v1"),
    re_path(r"^api/v2/instance/?$", views.instance_v2, name="instance_v2"),
    path("api/v1/apps", views.apps_create, name="apps"),
    path("api/v1/apps/verify_credentials", views.apps_verify_credentials, name="apps_verify_credentials"),
    path("api/v1/accounts", views.accounts_many, name="accounts"),
    path("api/v1/accounts/verify_credentials", views.verify_credentials, name="verify_credentials"),
    path("api/v1/accounts/lookup", views.account_lookup, name="account_lookup"),
    path("api/v1/accounts/relationships", views.relationships, name="relationships"),
    path("api/v1/accounts/familiar_followers", views.familiar_followers, name="familiar_followers"),
    path("api/v1/accounts/<str:raw_id>", views.account_detail, name="account"),
    path("api/v1/accounts/<str:raw_id>/statuses", views.account_statuses, name="account_statuses"),
    path("api/v1/accounts/<str:raw_id>/followers", views.account_followers, name="account_followers"),
    path("api/v1/accounts/<str:raw_id>/following", views.account_following, name="account_following"),
    path("api/v1/accounts/<str:raw_id>/follow", views.account_follow, name="account_follow"),
    path("api/v1/accounts/<str:raw_id>/unfollow", views.account_unfollow, name="account_unfollow"),
    path("api/v1/accounts/<str:raw_id>/remove_from_followers", views.account_remove_from_followers, name="account_remove_from_followers"),
    path("api/v1/accounts/<str:raw_id>/block", views.account_block, name="account_block"),
    path("api/v1/accounts/<str:raw_id>/unblock", views.account_unblock, name="account_unblock"),
    path("api/v1/accounts/<str:raw_id>/mute", views.account_mute, name="account_mute"),
    path("api/v1/accounts/<str:raw_id>/unmute", views.account_unmute, name="account_unmute"),
    path("api/v1/blocks", views.blocks, name="blocks"),
    path("api/v1/mutes", views.mutes, name="mutes"),
    path("api/v1/follow_requests", views.follow_requests, name="follow_requests"),
    path("api/v1/follow_requests/<str:raw_id>/authorize", views.follow_request_authorize, name="follow_request_authorize"),
    path("api/v1/follow_requests/<str:raw_id>/reject", views.follow_request_reject, name="follow_request_reject"),
    path("api/v1/suggestions", views.suggestions_v1, name="suggestions_v1"),
    path("api/v2/suggestions", views.suggestions_v2, name="suggestions_v2"),
    path("api/v1/statuses", views.status_create, name="statuses"),
    path("api/v1/statuses/<str:raw_id>", views.status_item, name="status"),
    path("api/v1/timelines/home", views.timeline_home, name="timeline_home"),
    path("api/v1/notifications", views.notifications_list, name="notifications"),
    path("api/v1/notifications/clear", views.notifications_clear, name="notifications_clear"),
    path("api/v1/notifications/unread_count", views.notifications_unread_count, name="notifications_unread_count"),
    path("api/v1/notifications/<str:raw_id>", views.notification_detail, name="notification"),
    path("api/v1/notifications/<str:raw_id>/dismiss", views.notification_dismiss, name="notification_dismiss"),
    re_path(r"^api/v[12]/(?P<rest>.*)$", views.not_found, name="not_found"),
]
