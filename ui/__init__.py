"""Squall's web daemons: the UI with Storm's REST API v1 (``squall ui``) and the logviewer
(``squall logviewer``). Floor 2: they read the cluster through the gRPC client only."""
