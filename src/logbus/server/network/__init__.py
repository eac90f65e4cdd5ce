"""Sockets: the listener accepts connections; each `Connection` reads frames, has the API
layer handle them one at a time, and writes responses in request order.

The entry point is `logbus.server.network.listener.Listener`.
"""
