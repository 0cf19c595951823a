"""components: the control plane (apiserver, scheduler, controller_manager)."""
