"""The kube-scheduler extender (filter / prioritize / bind) and the mutating admission
webhook. Not built yet (see README).
"""
