"""Cluster metadata and the controller that changes it.

The entry point is `logbus.controller.controller.Controller`. It keeps the cluster's
metadata in a `MetadataStore` (ZooKeeper's layout of paths and JSON values; the
`EmbeddedStore` implementation serves a stand-alone broker) and tells brokers about
leadership and metadata through a `ControllerChannel`.
"""
