"""The S3 gateway: an S3-protocol front end over lakectl repositories."""
