echo deploying
