"""Scheduler plugins, one module each, named as in kube-scheduler where one exists."""
