"""The EMR Serverless streaming job run as a custom resource: a replacement run resumes from its predecessor's checkpoint."""
