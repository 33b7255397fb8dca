"""The harness core: the attempt pipeline, tools and ports. Imports neither pytest nor docker."""
