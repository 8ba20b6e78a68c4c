return { limts = {} }
