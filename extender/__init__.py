"""The kube-scheduler extender (filter / prioritize / bind) and the admission webhook.

`service` holds the verbs over informer caches, `webhook` the AdmissionReview logic, `kube` the
only module that talks to the API server, `server` the HTTP translation. Placement decisions
are `gpuwarden.placement`'s (pure); nothing here imports the agent.
"""
