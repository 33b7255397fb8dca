"""The Docker adapter of the sandbox port: its factory and sandbox, the container policy, the
runner image, archive transfer to engines that cannot see this host, and several engines."""
