"""How the node starts: command line, ROS 2 shell, start-up checks, running until stopped."""
