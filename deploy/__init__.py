"""The deploy client workflow: Kubernetes manifests and a Helm chart rendered from one ModelSpec."""
